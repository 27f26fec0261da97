"""Models: α-β costs, communication schedules, fits, statistics, predicted timelines."""
