"""One folder per page: its script (page.py, layout only, run by Streamlit), its data
module (data.py: tables) and its chart builders (charts.py: Altair)."""
