"""The chat page: header, message view, composer and the per-chat settings panel."""
