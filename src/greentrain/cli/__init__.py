"""The command line: one thin module per subcommand; no arithmetic here."""
