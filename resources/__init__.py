"""Style sheets, icons and the bundled evaluation text (package data)."""
