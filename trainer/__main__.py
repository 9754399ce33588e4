from trainer.launch import run

run()
