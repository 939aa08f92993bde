"""``python -m moldau`` runs the same command as the ``moldau`` script."""

from moldau.cli.main import main

if __name__ == "__main__":
    main()
