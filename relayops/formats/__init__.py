"""Date formats for every admin page (FORMAT_MODULE_PATH): times to the second, as the timelines show them."""
