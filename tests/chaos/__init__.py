"""A seeded chaos campaign: faults drawn together, a recorded history, and a checker of it."""
