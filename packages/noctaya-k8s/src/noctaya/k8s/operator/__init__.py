"""The operator process (`noctaya-operator`): its flags, logs, metrics and wiring."""
