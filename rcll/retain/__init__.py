"""The write path: submit a retain job, chunk and classify items, store units, embed them."""
