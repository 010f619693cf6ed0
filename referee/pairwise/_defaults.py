"""What a comparison of two runs is judged on when the user names nothing (the CLI and the
viewer's form); kept apart so that naming it loads nothing else."""

DEFAULT_PAIRWISE_CRITERION = ("The response answers the user's input correctly, completely "
                              "and helpfully.")
