"""The window's pages, one package each. Pages never import controllers or workers; they expose signals."""
