"""Animations played in the browser: frames built once on the server (frames.py), the kernel
lines each phase runs (kernel_lines.py) and the component that plays them (component.py)."""
