"""The Decoding page: Flash-Decoding's splits, the paged cache, grouped-query heads."""
