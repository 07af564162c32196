"""State kept on disk: the ledger of main, build and test results, provenance, owners, retirement records,
the sweep journal, and the locks that guard them."""
