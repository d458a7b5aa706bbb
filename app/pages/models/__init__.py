"""The Models page: search Hugging Face, downloads, installed models."""
