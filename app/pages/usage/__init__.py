"""The Usage page: tokens per day, prices."""
