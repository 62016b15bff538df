def running_total(numbers):
    totals, total = [], 0
    for n in numbers:
        total += n
        totals.append(total)
    return totals
