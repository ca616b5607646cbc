"""``python -m dataset_rt``: the ``dataset-rt`` command (see `dataset_rt.cli`)."""

from dataset_rt.cli import main

if __name__ == "__main__":
    main()
