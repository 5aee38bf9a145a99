"""Local models: the sentence embedder and the tokenizer used to count budget tokens."""
