"""One module per resource of Confluent's API, each exporting ``routes``."""
