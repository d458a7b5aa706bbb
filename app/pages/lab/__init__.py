"""The quantization lab (a Settings page): measure a model's variants."""
