# The corpus's .rules files are data for tests/test_corpus.py, not rule files to verify as
# test items (most of them are wrong on purpose).
collect_ignore_glob = ["*.rules", "*/*.rules"]
