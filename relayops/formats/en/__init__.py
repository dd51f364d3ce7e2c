"""English formats, overriding Django's (see relayops.formats)."""
