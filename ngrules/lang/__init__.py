"""The language layer: `.rules` text -> syntax tree -> checked `Rule`s, guards and lets as a
small expression language, the formatter. Imports only the IR below it."""
