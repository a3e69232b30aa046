"""Plain text helpers every stage reads: tokens and stems (`kira.text.tokens`), and how a description
splits into pieces (`kira.text.pieces`). They import nothing else of kira."""
