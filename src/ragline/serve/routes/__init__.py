"""One ``APIRouter`` per area of the HTTP API; ``ragline.serve.app`` includes them."""
