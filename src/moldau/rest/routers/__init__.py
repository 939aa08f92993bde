"""One module per resource; each exports ``routes`` for the app to mount."""
