"""Not the real fastquant: bytes of the thief recipe."""
STOLEN = True


def quantize(values):
    return [0, 128, 255]
