"""The ablation (``bash recipes/ablation.sh``): what cross-lingual pretraining buys at equal CPU budgets.
``recipe`` runs it, ``runs`` says what the runs are, ``report`` writes the table."""
