//! abcd-redact: the redaction engine.
