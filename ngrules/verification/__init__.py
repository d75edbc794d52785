"""The verification layer: instances synthesised from a rule's pattern, `verify`, the public
hypothesis strategies (`ngrules.testing`) and the pytest plugin. Imports the engine and below."""
