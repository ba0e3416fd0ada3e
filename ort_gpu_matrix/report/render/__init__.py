"""How results are shown: the terminal table now; Markdown and HTML reports later."""
