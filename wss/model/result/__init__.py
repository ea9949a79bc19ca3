"""The Result: what a finished run measured (:mod:`.measure`), as data (:mod:`.results`), with its
energy (:mod:`.energy`) and the failures a long run meets (:mod:`.goodput`)."""
