"""The engine layer: compiled and reference matchers, compiled rules, the rewrite driver and
explain. Imports the language and the IR, never verification or the command line."""
