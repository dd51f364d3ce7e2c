"""Extraction: the extractor protocol, the rules extractor and the validation of what it extracted."""
