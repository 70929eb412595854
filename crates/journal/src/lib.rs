//! abcd-journal: see journal-format/ for the byte-level format.
