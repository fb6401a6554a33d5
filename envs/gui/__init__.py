"""The GUI env: web apps driven through a real Chromium, observed as an accessibility tree."""
