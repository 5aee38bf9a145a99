"""Document files (PDF, DOCX, PPTX, XLSX, HTML, EPUB, text): conversion and file jobs."""
