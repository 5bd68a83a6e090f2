"""ContrastLab's logic, importable without Streamlit. Importing it sets the garbage collector for the training
stack's bulk imports (``collector``)."""

from core import collector

collector.tune()
