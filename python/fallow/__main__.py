"""``python -m fallow``: the ``fallow`` command (see :mod:`fallow._cli`)."""

if __name__ == "__main__":
    from fallow._cli import main

    main()
