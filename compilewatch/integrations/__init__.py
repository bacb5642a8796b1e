"""Trainer callbacks that collect in process (compilewatch.collectors.in_process) and take the model
name, the run's label and the optimizer steps from the trainer, so the bundle's iteration period is
the trainer's own step:

    from compilewatch.integrations.lightning import CompileWatchCallback       # Lightning
    from compilewatch.integrations.transformers import CompileWatchCallback    # Hugging Face Trainer

Each module imports its trainer's package; this one imports neither.
"""
