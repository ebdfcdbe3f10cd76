"""ipywidgets for the workbook: one module per widget; each renders records from ``course``."""
