"""The Backward pass page: the backward loop, gradients and their cost."""
