"""Services of the window: worker lanes, the operations helper, errors in words, settings saving, the single instance, tray and desktop integration."""
