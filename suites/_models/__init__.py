"""Models written for the model-level suites (GPT-2-style and Llama-style); not suites themselves."""
