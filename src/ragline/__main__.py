from ragline.cli import app

app()
