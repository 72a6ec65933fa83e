"""The scaling sweep (``bash recipes/scale.sh``): which model size and settings learn most per CPU-minute.
``recipe`` runs it, ``runs`` says what the runs are, ``report`` writes the tables."""
