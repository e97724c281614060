"""The Online softmax page: one query row's running max and sum over key tiles."""
