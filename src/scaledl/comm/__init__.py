"""Who is who, the flat parameter buffer, and the message patterns."""
