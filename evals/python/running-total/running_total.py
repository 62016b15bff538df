def running_total(numbers):
    pass
